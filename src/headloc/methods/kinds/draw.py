"""Kind ``draw``: no evaluation at all; the recovery ranks the heads from the seed alone (a
baseline). Its one step is the recovery, which waits for the model only to read its heads."""

from __future__ import annotations

from headloc.methods.kinds import Kind, SearchFiles
from headloc.methods.steps import RecoverInputs, RecoverParams


class Draw(Kind):
    name = "draw"
    seeded = True
    steps = {"recover": RecoverParams}
    unassessed = ("unmeasured", "a random draw scores nothing")

    def recovery_inputs(self, files: SearchFiles, search, model=()) -> RecoverInputs:
        return RecoverInputs(model=list(model))

    def drive(self, search, job) -> RecoverInputs:
        return RecoverInputs()
