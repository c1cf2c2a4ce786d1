"""The one error type adapters raise for bad input."""

from __future__ import annotations

__all__ = ["AdapterError"]


class AdapterError(ValueError):
    """An object that cannot be read: names the source, the object and the field.

    ``str(err)`` reads like ``job.yaml: PyTorchJob llm/train: spec.pytorchReplicaSpecs.Worker.replicas:
    expected a non-negative integer, got 'eight'``.
    """

    def __init__(self, message: str, *, source: str = "", obj: str = "", field: str = "") -> None:
        self.source, self.obj, self.field, self.detail = source, obj, field, message
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [p for p in (self.source, self.obj, self.field) if p]
        return ": ".join(parts + [self.detail])

    def within(self, *, source: str | None = None, obj: str | None = None) -> "AdapterError":
        """Fill in the source file or object name when an inner helper did not know them."""
        if source and not self.source:
            self.source = source
        if obj and not self.obj:
            self.obj = obj
        self.args = (self._render(),)
        return self
