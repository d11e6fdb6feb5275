"""Sentences → per-token layer vectors: :class:`~.embedder.Embedder` (batching, device,
stateless and stateful runs) and its caches (:mod:`.caches`)."""
