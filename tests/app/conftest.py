"""The app's tests run under the app's process-wide settings (elmo_explorer.startup): the short
GIL switch interval the responsiveness tests depend on. Torch's thread count is left as the
engine tests have it."""
from elmo_engine import runtime
from elmo_explorer.startup import GIL_SWITCH_S

runtime.configure(gil_switch_s=GIL_SWITCH_S)
