"""Why a task is not running: what the database says (``task``) and what the
workers hosted in this process add (``hosted``)."""

from cairnq_tui.why.hosted import hosted_reasons
from cairnq_tui.why.task import clock_time, why_not_running

__all__ = ["clock_time", "hosted_reasons", "why_not_running"]
