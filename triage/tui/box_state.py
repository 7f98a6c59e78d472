"""Whether the decisions on screen are still those of the ticket in the box.

After a score the box still holds the scored ticket. Once its text changes (a new ticket pasted, or
any edit) the decisions on screen are the *previous* ticket's until F5 scores the box; the screen
then dims them and names that ticket. With a thread open the editor takes the thread's next message,
and the decisions stay the thread's.

No Textual here: the rule is the session's, and can move with it.
"""

from __future__ import annotations

from typing import Literal

from triage.domain.ticket import clean_text

BoxChange = Literal["same", "added", "changed"]


def box_change(box_text: str, scored_text: str | None, *, composing: bool) -> BoxChange:
    """How the box's text stands to the scored ticket's text (``scored_text``, cleaned, as scored).

    ``same``: the box holds the scored ticket (also: nothing scored, or a thread is open and the editor
    takes its next message); ``added``: the scored ticket with text under it (F8/F9/F10 add that text
    as a reply); ``changed``: another text (F5 scores it as a new ticket).
    """
    if scored_text is None or composing:
        return "same"
    text = clean_text(box_text)
    if text == scored_text:
        return "same"
    return "added" if text.startswith(scored_text) else "changed"
