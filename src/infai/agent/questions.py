"""Permission questions answered from code: a callback, or an event to answer.

The policy asks an *approver* (an async function of an
:class:`~infai.tools.Ask` returning a :class:`~infai.tools.Reply`) whenever its
rules say "ask". A program may answer in either of two ways, and both reach the
policy as the TUI's dialog does, so the decision is recorded the same way (the
tool result's ``permission`` metadata: verdict, ``by: user``, the reason, the
time) and an "allow always" is kept with the session:

- a **callback**, plain or async (:func:`as_approver` makes either an
  approver). A plain one runs in a worker thread, so a callback that blocks
  (``input()`` on a terminal, a web request) stalls no other session;
- an **event**: :meth:`~infai.agent.AgentSession.prompt_with_questions` yields
  a :class:`Question` in the turn's events, in order, and the turn waits until
  the program calls :meth:`Question.answer` (from any task: the iteration goes
  on meanwhile only if the program answers from elsewhere).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

from infai.tools import Approver, Ask, Reply
from infai.tools.offload import off_loop

#: what a program may give as an approver: async, or plain (run in a worker thread)
AnyApprover = Callable[[Ask], Awaitable[Reply]] | Callable[[Ask], Reply]


def as_approver(answer: AnyApprover) -> Approver:
    """The policy's approver for ``answer``: an async function as it is; a plain
    function wrapped to run in a worker thread (it may block: a person typing).
    A plain function that returns an awaitable has it awaited too."""
    if inspect.iscoroutinefunction(answer):
        return cast(Approver, answer)

    async def approver(ask: Ask) -> Reply:
        reply: Reply | Awaitable[Reply] = await off_loop(answer, ask)
        if inspect.isawaitable(reply):
            return await reply
        return reply

    return approver


@dataclass(eq=False)
class Question:
    """A permission question in a turn's events: the turn waits for its answer.

    ``ask`` is what the TUI's dialog shows (the tool, the subject rules match,
    why it asks, the rules "allow always" would add). Answer with
    :meth:`answer`: ``"allow"``, ``"deny"``, ``"allow-always"``,
    :class:`~infai.tools.DenyWith` (the model reads your reason) or
    :class:`~infai.tools.AllowAlways` (your own patterns).
    """

    ask: Ask
    reply: asyncio.Future[Reply] = field(repr=False)

    def answer(self, reply: Reply) -> None:
        """Answer the question (once; a second answer is ignored, as is one given
        after the turn was cancelled)."""
        if not self.reply.done():
            self.reply.set_result(reply)

    @property
    def answered(self) -> bool:
        """Whether an answer was given (or the turn stopped waiting for one)."""
        return self.reply.done()


__all__ = ["AnyApprover", "Question", "as_approver"]
