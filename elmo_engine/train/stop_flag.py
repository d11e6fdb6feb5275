"""Ctrl-C during training: the first press asks the loop to stop after the current step (and save);
a second press interrupts at once."""
from __future__ import annotations

import signal
import threading


class StopFlag:
    """Set by Ctrl-C (first press) so that training stops after the current step."""

    def __init__(self):
        self.set = False
        self._old = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.getsignal(signal.SIGINT)

            def handler(signum, frame):
                self.set = True
                signal.signal(signal.SIGINT, self._old)   # a second Ctrl-C interrupts at once
            signal.signal(signal.SIGINT, handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
