"""The ARC server's counting rules, as a client sees them: which answer counts how (ONLINE/COMPETITION capture).

The server is the toolkit's REST API (``arc_agi/api.py`` ``RestAPI.cmd``) over arcengine games; a client only sees
what it sent and what was answered, so this module keeps, per guid, the little of the server's game state the
rules depend on, all of it visible in earlier answers:

- an answer for a guid the card has not seen is a game the server just ``make``-d: its first reset started a play;
- RESET on a known guid: arcengine (``handle_reset``) does a full reset, which starts a new play, when the level has
  had no action yet (``_action_count == 0``) or the game was won, otherwise a level reset (one reset, one action);
- in competition mode the server does not execute a RESET sent while the level has had no action: it re-applies
  the play's last observation to the card (one action, and one reset as well when that observation was itself a
  RESET) and answers with that observation again, so an answer whose action is not the RESET sent is one;
- ACTION1..7 answered with a frame counts one action; ``_action_count`` is back to 0 when the action completed a
  level that was not the last (arcengine's ``set_level``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RESET = 0


@dataclass(slots=True)
class GuidState:
    """What the server's game behind one guid looks like, from the answers seen."""

    game_id: str
    levels_completed: int = 0
    state: str = "NOT_FINISHED"
    #: arcengine's ``_action_count == 0``: no action since the level began.
    level_untouched: bool = True


@dataclass(slots=True)
class Verdict:
    """How one answered request counts on the card."""

    full_reset: bool = False
    reapplied: bool = False


@dataclass(slots=True)
class ServerModel:
    """The per-guid state of one card's games on the server."""

    competition: bool = False
    guids: dict[str, GuidState] = field(default_factory=dict)

    def judge(self, sent: int, game_id: str, guid: str, answered: int, levels_completed: int, state: str) -> Verdict:
        """The verdict for an answer (``answered`` is the action id in the answer) to action ``sent``; the model
        moves past it."""
        g = self.guids.get(guid)
        if g is None:
            # A guid never answered before: the server made the game, and make's first reset began a play.
            self.guids[guid] = GuidState(game_id=game_id, levels_completed=levels_completed, state=state)
            return Verdict(full_reset=answered == RESET)
        if sent == RESET:
            if answered != RESET or (self.competition and g.level_untouched):
                return Verdict(reapplied=True)  # the server re-applied the last observation; the game is unchanged
            full = g.level_untouched or g.state == "WIN"
            g.level_untouched, g.levels_completed, g.state = True, levels_completed, state
            return Verdict(full_reset=full)
        advanced = levels_completed > g.levels_completed and state != "WIN"
        g.level_untouched, g.levels_completed, g.state = advanced, levels_completed, state
        return Verdict()
