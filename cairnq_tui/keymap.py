"""Every key binding of the console, in one place.

Widgets take their ``BINDINGS`` from here; the help screen and the command
palette read the same tables, so what the footer shows, what ``?`` lists and
what ctrl+p offers cannot drift apart. ``CONTROL_ACTIONS`` are the writes that
``--read-only`` disables.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

APP: list[BindingType] = [
    Binding("q", "quit", "Quit"),
    Binding("question_mark", "help", "Help", key_display="?"),
    Binding("1", "show_view('tasks')", "Tasks", show=False),
    Binding("2", "show_view('queues')", "Queues", show=False),
    Binding("3", "show_view('leases')", "Leases", show=False),
    Binding("4", "show_view('keys')", "Keys", show=False),
    Binding("5", "show_view('waits')", "Waits", show=False),
    Binding("6", "show_view('quotas')", "Quotas", show=False),
    Binding("7", "show_view('resources')", "Resources", show=False),
    Binding("8", "show_view('calls')", "Calls", show=False),
    Binding("9", "show_view('errors')", "Errors", show=False),
    Binding("p", "toggle_pause", "Pause"),
    Binding("ctrl+r", "refresh_now", "Refresh now (once, also while paused)", show=False),
    Binding("n", "submit", "Submit"),
    Binding("P", "purge", "Purge", key_display="P"),
    Binding("colon", "switch_target", "Switch target", key_display=":", show=False),
]

TASKS: list[BindingType] = [
    Binding("enter", "open_task", "Detail", show=False),
    Binding("space", "toggle_select", "Select"),
    Binding("c", "cancel", "Cancel"),
    Binding("C", "cancel_matching", "Cancel all", key_display="C"),
    Binding("r", "retry", "Retry"),
    Binding("R", "retry_matching", "Retry all", key_display="R"),
    Binding("e", "replace", "Replace"),
    Binding("left_square_bracket", "page_newer", "Newer", key_display="["),
    Binding("right_square_bracket", "page_older", "Older", key_display="]"),
    Binding("slash", "focus_search", "Search", key_display="/"),
    Binding("f", "focus_filters", "Filter", show=False),
    Binding("Q", "focus_queue_filter", "Queue filter", key_display="Q", show=False),
    Binding("N", "focus_name_filter", "Name filter", key_display="N", show=False),
    Binding("x", "clear_filters", "Clear filters", show=False),
    Binding("o", "choose_columns", "Columns", show=False),
    Binding("s", "next_sort", "Sort by", show=False),
    Binding("S", "flip_sort", "Sort direction", key_display="S", show=False),
    Binding("t", "next_time_range", "Time range", show=False),
    Binding("u", "run_now", "Run now", show=False),
    Binding("d", "delay", "Delay by", show=False),
    Binding("y", "copy_id", "Copy id", show=False),
    Binding("Y", "copy_json", "Copy JSON", key_display="Y", show=False),
    Binding("E", "export", "Export", key_display="E", show=False),
    Binding("escape", "clear", "Clear", show=False),
]

#: Every table of the console (the tasks, queues, leases, keys and hosted views).
TABLE: list[BindingType] = [
    Binding("home,g", "first_row", "First row", key_display="home/g", show=False),
    Binding("end,G", "last_row", "Last row", key_display="end/G", show=False),
]

QUEUES: list[BindingType] = [
    Binding("enter", "open_queue", "Tasks of queue"),
]

LEASES: list[BindingType] = [
    Binding("enter", "open_task", "Detail"),
    Binding("c", "cancel", "Cancel"),
    Binding("C", "cancel_worker", "Cancel worker's tasks", key_display="C"),
]

KEYS: list[BindingType] = [
    Binding("enter", "open_task", "Detail", show=False),
    Binding("w", "follow", "Follow key"),
    Binding("c", "cancel_by_key", "Cancel by key"),
    Binding("r", "retry_by_key", "Retry by key"),
    Binding("e", "replace", "Replace"),
    Binding("left_square_bracket", "page_newer", "Prev", key_display="["),
    Binding("right_square_bracket", "page_older", "Next", key_display="]"),
    Binding("slash", "focus_search", "Search", key_display="/"),
    Binding("escape", "stop_follow", "Stop following", show=False),
]

DETAIL: list[BindingType] = [
    Binding("escape", "back", "Back"),
    Binding("c", "cancel", "Cancel"),
    Binding("r", "retry", "Retry"),
    Binding("e", "replace", "Replace"),
]

CONFIRM: list[BindingType] = [
    Binding("y", "confirm", "Confirm"),
    Binding("escape", "dismiss_none", "Back"),
]

DIALOG: list[BindingType] = [Binding("escape", "dismiss_none", "Back")]

#: A write the database has not answered yet (``screens/pending.py``).
PENDING: list[BindingType] = [Binding("escape", "abandon", "Abandon the write")]

SUBMIT: list[BindingType] = [
    Binding("ctrl+s", "submit", "Submit"),
    Binding("escape", "dismiss_none", "Back"),
]

HELP: list[BindingType] = [Binding("escape,question_mark,q", "dismiss", "Close")]

#: Controls of the selected hosted worker (``--worker``), on every hosted view.
HOSTED: list[BindingType] = [
    Binding("z", "hosted_toggle_pause", "Pause/resume worker"),
    Binding("D", "hosted_drain", "Drain", key_display="D"),
    Binding("S", "hosted_restart", "Start", key_display="S"),
    Binding("L", "hosted_reload", "Reload", key_display="L"),
    Binding("plus,equals_sign", "hosted_more", "Concurrency +", key_display="+"),
    Binding("minus", "hosted_less", "Concurrency -", key_display="-"),
    Binding("W", "hosted_next", "Next worker", key_display="W", show=False),
]

ERRORS: list[BindingType] = [
    Binding("enter,t", "show_traceback", "Traceback", key_display="enter"),
]


#: A view on a screen of its own (Failures, Metrics, Audit, Workers): escape goes back.
PANEL: list[BindingType] = [Binding("escape", "back", "Back")]

FAILURES: list[BindingType] = [
    Binding("enter", "open_group", "Group's tasks"),
    Binding("w", "next_window", "Window"),
    Binding("r", "retry_group", "Retry group"),
    Binding("c", "cancel_group", "Cancel group"),
    Binding("p", "purge_group", "Purge group"),
    Binding("x", "open_example", "Example", show=False),
]

METRICS: list[BindingType] = [Binding("w", "next_window", "Window")]

FAILURE_GROUP: list[BindingType] = [
    Binding("enter", "open_task", "Detail"),
    Binding("r", "retry_group", "Retry group"),
    Binding("c", "cancel_group", "Cancel group"),
]


def _bindings(table: list[BindingType]) -> list[Binding]:
    """A table's bindings as ``Binding`` objects (every table here is made of them)."""
    return [b for b in table if isinstance(b, Binding)]


#: (section title, bindings) as the help screen lists them.
SECTIONS: list[tuple[str, list[Binding]]] = [
    ("Everywhere", _bindings(APP)),
    ("Tasks view", _bindings(TASKS)),
    ("Queues view", _bindings(QUEUES)),
    ("Leases view", _bindings(LEASES)),
    ("Keys view", _bindings(KEYS)),
    ("Hosted worker views (Waits, Quotas, Resources, Calls, Errors)", _bindings(HOSTED)),
    ("Errors view", _bindings(ERRORS)),
    ("Task detail", _bindings(DETAIL)),
    ("Every table", _bindings(TABLE)),
    ("Confirmations", _bindings(CONFIRM)),
    ("Submit and replace forms (tab completes the name and the queue)", _bindings(SUBMIT)),
    ("Other dialogs (columns, key, purge, targets, traceback)", _bindings(DIALOG)),
    ("A write the database has not answered (the pending dialog)", _bindings(PENDING)),
    ("Failures view (ctrl+p: Failures)", _bindings(FAILURES)),
    ("A failure group's tasks", _bindings(FAILURE_GROUP)),
    ("Metrics view (ctrl+p: Metrics)", _bindings(METRICS)),
]

#: Actions that write to the database: disabled (and shown dimmed) in read-only mode.
CONTROL_ACTIONS = frozenset(
    {
        "submit",
        "purge",
        "cancel",
        "cancel_matching",
        "cancel_worker",
        "retry",
        "retry_matching",
        "replace",
        "cancel_by_key",
        "retry_by_key",
        "cancel_by_key_prompt",
        "retry_by_key_prompt",
        "retry_group",
        "cancel_group",
        "purge_group",
        "run_now",
        "delay",
    }
)
