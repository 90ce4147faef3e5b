"""The kinds whose search runs in one job (rule search_job; one call in the driver):
:class:`OneJob`, which the gradient, sequential and guided kinds subclass. Machinery, not a kind
(the kinds' registry unpacks one kind per module of :mod:`headloc.methods.kinds`)."""

from __future__ import annotations

from headloc.methods.kinds import Kind, SearchFiles, read_result
from headloc.methods.steps import RecoverInputs


class OneJob(Kind):
    """A kind whose search runs in one job (rule search_job, or one call in the driver): its step
    is named as the kind, :meth:`run` makes it on a :class:`headloc.methods.driver.Job` (the
    workflow's script builds the job from the model it loads), and the recovery reads the job's one
    result, ``<kind>.json``."""

    rule = "search_job"
    recover = staticmethod(read_result)

    def recovery_inputs(self, files: SearchFiles, search, model=()) -> RecoverInputs:
        return RecoverInputs(result=files.result(self.name))

    def drive(self, search, job):
        self.run(self.params(self.name, search), job)
        return self.recovery_inputs(job.files, search)

    def run(self, params, job) -> dict:
        """The kind's one step with its parameters ``params`` on ``job``: writes the job's result
        (``job.files.result(kind)``) and returns it."""
        raise NotImplementedError
