"""kjit's exceptions: one class per kjit_status, all under KjitError.

Each carries ``status`` (kjit_status_name's text, e.g. "shape error") and
``code`` (the kjit_status number); str() is the library's message, which for
compile errors holds every diagnostic with its file:line:col, the line and a
caret.  Each also derives from the built-in exception a Python programmer
would try first (ValueError for shapes, TypeError for element types, ...).
"""


class KjitError(Exception):
    code = None
    status = "error"

    def __init__(self, message, code=None, status=None):
        super().__init__(message)
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    @property
    def message(self):
        return self.args[0] if self.args else ""


class CompileError(KjitError):
    code, status = 1, "compile error"


class KjitIOError(KjitError, OSError):
    code, status = 2, "I/O error"


class NotFoundError(KjitError, AttributeError):
    code, status = 3, "not found"


class InvalidArgumentError(KjitError, ValueError):
    code, status = 4, "invalid argument"


class ShapeError(KjitError, ValueError):
    code, status = 5, "shape error"


class DTypeError(KjitError, TypeError):
    code, status = 6, "type error"


class NoDeviceError(KjitError, RuntimeError):
    code, status = 7, "no device"


class CudaError(KjitError, RuntimeError):
    code, status = 8, "CUDA error"


class KjitMemoryError(KjitError, MemoryError):
    code, status = 9, "out of memory"


class BackendError(KjitError, RuntimeError):
    code, status = 10, "back-end error"


class CheckError(KjitError, RuntimeError):
    """Checked mode: a run-time check failed (an index outside its array,
    integer division by zero, ...); the message names the source place."""
    code, status = 11, "check failed"


class CancelledError(KjitError, RuntimeError):
    """Context.cancel() (kjit_context_cancel) stopped the call; its outputs
    are partly written.  (Ctrl-C stops a call too, and raises
    KeyboardInterrupt.)"""
    code, status = 12, "cancelled"


class KjitTimeoutError(KjitError, TimeoutError):
    """The call ran past the context's time limit and was stopped; its
    outputs are partly written."""
    code, status = 13, "time limit exceeded"


BY_CODE = {cls.code: cls for cls in (CompileError, KjitIOError, NotFoundError,
                                     InvalidArgumentError, ShapeError, DTypeError,
                                     NoDeviceError, CudaError, KjitMemoryError, BackendError,
                                     CheckError, CancelledError, KjitTimeoutError)}


def from_status(code, message):
    cls = BY_CODE.get(code, KjitError)
    return cls(message, code, None if cls is not KjitError else f"status {code}")


class CacheWarning(UserWarning):
    """The runtime's warnings ("kjit: warning: ..."): a compiled-code cache
    folder or entry refused as unsafe (docs/security.md), or KJIT_CACHE_MAX
    not a size.  The call goes on, compiling without the disk cache."""
