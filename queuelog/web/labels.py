"""Words the pages show for values that live in the data (statuses, priorities, roles, events, kinds).

Marked here so that extraction finds them; the templates translate them with ``_(value)``.
"""


def N_(message: str) -> str:  # noqa: N802 - the conventional name of a no-op gettext marker
    return message


LABELS = [
    # statuses
    N_("waiting"),
    N_("pending"),
    N_("running"),
    N_("completed"),
    N_("failed"),
    N_("cancelled"),
    # priorities
    N_("low"),
    N_("medium"),
    N_("high"),
    N_("critical"),
    # roles and key kinds
    N_("admin"),
    N_("producer"),
    N_("worker"),
    # events in a job's history, shown with "_" as a space (retry_scheduled: "retry scheduled")
    N_("enqueued"),
    N_("claimed"),
    N_("retry scheduled"),
    N_("lease expired"),
    N_("retried"),
]

# Events of running jobs (docs/running-jobs.md), with "_" shown as a space like the others:
# cancel_requested is "cancel requested".
RUNNING_LABELS = [N_("cancel requested"), N_("snoozed")]

# Workflows (docs/workflows.md): a job waiting for its dependencies, the event that ends the wait, and the
# statuses of a batch.
WORKFLOW_LABELS = [N_("released"), N_("succeeded"), N_("finished with failures")]
