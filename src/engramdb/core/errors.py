"""The one error tree of Engram.

Every error Engram raises on purpose is an ``EngramError``. The tree splits by who must act::

    EngramError
    ├── UsageError                  the caller must change the call
    │   ├── ValidationError         bad input; nothing was changed
    │   │   ├── InvalidKeyError
    │   │   ├── InvalidValueError
    │   │   ├── ValueTooLargeError
    │   │   ├── InvalidScopeError
    │   │   ├── InvalidPatternError a user pattern too long or outside the linear-time syntax
    │   │   ├── UnsafePathError     a name would leave the memory-file folder
    │   │   ├── MemoryFileError     a hand-edited memory file cannot be read
    │   │   └── RecallQueryError    every provider a recall asked refused its query
    │   ├── NotFoundError           the named resource does not exist
    │   ├── ConflictError           the write collides with what is stored or in flight
    │   │   └── VersionConflictError    the record is no longer the version the caller read
    │   ├── AuthenticationError     no credentials, or credentials that do not verify
    │   ├── PermissionDeniedError   valid credentials without the right to this request
    │   ├── ProviderNotFoundError
    │   ├── ProviderReadOnlyError
    │   ├── NoProviderForTierError
    │   ├── DuplicateProviderError
    │   ├── GraphMemoryError        graph memory was asked about what it does not hold
    │   │   ├── EntityNotFoundError
    │   │   ├── RelationNotFoundError
    │   │   └── InvalidTraversalError   (also a ValidationError)
    │   ├── UnsupportedTargetError  an open() target no backend understands
    │   └── StaleVectorsError       the store holds vectors of another embedding model
    └── EngramRuntimeError          the system failed; the call may succeed later
        ├── StorageError            the backend failed; the transaction was rolled back
        │   ├── MigrationError
        │   └── StorageBusyError    another connection held the write lock past the wait
        ├── RecallError             every provider asked by a recall failed, not all on the query
        ├── EngineClosedError
        ├── EmbedderError           an embedding model or endpoint failed (details: status_code)
        │   ├── ModelIntegrityError a model file is missing or differs from its pinned sha256
        │   └── EmbedderUnavailableError  (also a ModelUnavailableError)
        ├── RerankError             a reranking model or endpoint failed (details: status_code)
        │   └── RerankUnavailableError    (also a ModelUnavailableError)
        ├── LLMError                a chat model endpoint failed (details: status_code, retryable)
        │   ├── LLMUnavailableError       (also a ModelUnavailableError)
        │   └── LLMOutputError      the model answered, but nothing valid (details: attempts)
        │       └── LLMEmptyAnswerError   it answered nothing at all
        └── ModelUnavailableError   a model server stayed busy or down through every retry

``EngramError`` never shadows Python's built-in ``MemoryError``. Each error carries structured
fields in ``details`` so the HTTP, MCP and CLI edges can map it without parsing messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class EngramError(Exception):
    """Root of every error Engram raises on purpose.

    Attributes:
        code: a stable, machine-readable name for the error kind.
        details: structured fields describing what went wrong.
    """

    code = "engram_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        """The error as plain data, for JSON output at the edges."""
        return {"error": self.code, "message": self.message, "details": self.details}


class UsageError(EngramError):
    """The call itself is wrong; repeating it unchanged fails the same way."""

    code = "usage_error"


class ValidationError(UsageError):
    """Input failed validation; nothing was written."""

    code = "validation_error"


class InvalidKeyError(ValidationError):
    """A memory key is empty, too long, or holds characters keys may not hold."""

    code = "invalid_key"


class InvalidValueError(ValidationError):
    """A value cannot be stored (not JSON-representable, or of a rejected type)."""

    code = "invalid_value"


class ValueTooLargeError(ValidationError):
    """A value's serialised size exceeds the configured limit."""

    code = "value_too_large"


class InvalidScopeError(ValidationError):
    """A scope field is missing or malformed."""

    code = "invalid_scope"


class InvalidPatternError(ValidationError):
    """A user-supplied regular expression is longer than allowed, does not compile, or needs
    what a linear-time engine cannot do (backreferences, lookaround). ``details``: ``pattern``
    and ``reason``."""

    code = "invalid_pattern"


class UnsafePathError(ValidationError):
    """A key, category or scope name would lead a memory file out of its folder (``..``, a
    separator, an absolute path, a control, format or bidi character, a symlink)."""

    code = "unsafe_path"


class MemoryFileError(ValidationError):
    """A memory file edited by hand cannot be read back (``details``: path and line)."""

    code = "invalid_memory_file"


class RecallQueryError(ValidationError):
    """Every provider a recall asked refused the query itself (a filter none can evaluate):
    asking again unchanged fails the same way. ``details["failures"]`` names each provider
    and its error."""

    code = "invalid_recall_query"


class NotFoundError(UsageError):
    """The named resource (task context, plan, session, state key, …) does not exist.

    ``details`` names it: ``resource`` and ``id``.
    """

    code = "not_found"


class ConflictError(UsageError):
    """The write collides with stored state (the id is taken) or with a request in flight."""

    code = "conflict"


class VersionConflictError(ConflictError):
    """The caller's expected version of a record is not the stored one: someone else wrote
    it since the caller read it. Nothing was written; read it again and retry.

    ``details``: ``key`` (and ``resource``/``id`` for resources), ``expected`` and ``current``.
    """

    code = "version_conflict"


class AuthenticationError(UsageError):
    """No credentials were given, or they do not verify (unknown, revoked, expired)."""

    code = "unauthenticated"


class PermissionDeniedError(UsageError):
    """The credentials are valid but do not allow this request (another tenant or user, or
    a read-only credential asked to write)."""

    code = "permission_denied"


class ProviderNotFoundError(UsageError):
    """The requested provider id is not registered."""

    code = "provider_not_found"


class ProviderReadOnlyError(UsageError):
    """A write was attempted on a read-only provider."""

    code = "provider_read_only"


class NoProviderForTierError(UsageError):
    """No registered provider serves the requested tier."""

    code = "no_provider_for_tier"


class DuplicateProviderError(UsageError):
    """A different provider instance is already registered under this id."""

    code = "duplicate_provider"


class GraphMemoryError(UsageError):
    """A graph memory operation named what the graph does not hold, or asked a bad query."""

    code = "graph_error"


class EntityNotFoundError(GraphMemoryError):
    """A graph entity the call needs does not exist; nothing was written.

    ``details`` carries ``entity_id``.
    """

    code = "entity_not_found"


class RelationNotFoundError(GraphMemoryError):
    """A graph relation the call names does not exist; ``details`` carries ``relation_id``."""

    code = "relation_not_found"


class InvalidTraversalError(GraphMemoryError, ValidationError):
    """A traversal query is malformed (a path pattern without a target, a bad depth)."""

    code = "invalid_traversal"


class UnsupportedTargetError(UsageError):
    """``engramdb.open`` was given a path or URL no backend understands."""

    code = "unsupported_target"


class StaleVectorsError(UsageError):
    """The store holds vectors of another embedding model than the engine's (raised by
    ``open`` with ``on_model_change="error"``; ``details``: ``model``, ``stored_models``).

    Re-embedding them (``Engine.reindex(stale_only=True)``, ``engram reindex --stale``) fixes it.
    """

    code = "stale_vectors"


class StaleVectorsWarning(UserWarning):
    """Opening found vectors of another embedding model (``on_model_change="warn"``)."""


class _Failure(Protocol):
    @property
    def provider_id(self) -> str: ...
    @property
    def error(self) -> str: ...
    @property
    def message(self) -> str: ...


class PartialRecallWarning(UserWarning):
    """A recall answered without some of the providers it asked, which failed; the results
    are those of the others (``MemoryManager.recall_report`` names the failures)."""

    @classmethod
    def naming(cls, failures: Iterable[_Failure]) -> PartialRecallWarning:
        """The warning of a recall that answered without ``failures``' providers."""
        return cls(
            "recall answered without providers that failed: "
            + "; ".join(f"{f.provider_id} ({f.error}: {f.message})" for f in failures)
        )


class EngramRuntimeError(EngramError):
    """The system failed while doing a valid request; it may succeed later."""

    code = "runtime_error"


class StorageError(EngramRuntimeError):
    """The storage backend failed; the transaction was rolled back."""

    code = "storage_error"


class MigrationError(StorageError):
    """A schema migration could not be applied."""

    code = "migration_error"


class StorageBusyError(StorageError):
    """Another connection held the database's write lock longer than a write may wait
    (details: ``waited_s``); nothing was written, and the write may be tried again."""

    code = "storage_busy"


class RecallError(EngramRuntimeError):
    """Recall failed in every provider it asked, not all of them on the query itself (a
    store, a model or a timeout failed). ``details["failures"]`` names each provider; when
    every one of them ran out of time, ``details["retry_after_s"]`` is that time (a busy
    machine: the recall may answer after such a pause)."""

    code = "recall_error"


class EngineClosedError(EngramRuntimeError):
    """The engine (or backend) was used after ``close()``."""

    code = "engine_closed"


class EmbedderError(EngramRuntimeError):
    """An embedding model could not be loaded or run, or an embeddings endpoint failed.

    ``details`` may carry ``status_code`` (HTTP answers), ``retryable`` and, when a package is
    missing, ``package`` and ``install`` (the pip command that fixes it).
    """

    code = "embedder_error"


class ModelIntegrityError(EmbedderError):
    """A model file is missing or its sha256 differs from the one pinned in the code.

    Raised before the file is loaded, so a truncated or tampered file is never run.
    """

    code = "model_integrity_error"


class RerankError(EngramRuntimeError):
    """A reranking endpoint failed: transport, timeout, HTTP status or malformed answer.

    ``details`` carries ``url`` and ``retryable``, and ``status_code`` when the server answered.
    Search does without it: the hits keep their hybrid order.
    """

    code = "rerank_error"


class LLMError(EngramRuntimeError):
    """A chat-completions request failed: transport, timeout, HTTP status or malformed answer.

    ``details`` carries ``url`` and ``retryable``, and ``status_code`` when the server answered.
    Callers that can do without the model (summaries) fall back to a deterministic path.
    """

    code = "llm_error"


class ModelUnavailableError(EngramRuntimeError):
    """A remote model (chat, embeddings, rerank) stayed busy or unreachable through every
    retry its ``RetryPolicy`` allowed: rate limits, 5xx answers, timeouts, refused connections.

    ``details`` carries ``url``, ``attempts``, ``waited_s`` and, when the server answered,
    ``status_code`` and ``retry_after_s``. Each client raises its own subclass, which is also
    its usual error type (an ``EmbedderUnavailableError`` is an ``EmbedderError``).
    """

    code = "model_unavailable"


class EmbedderUnavailableError(ModelUnavailableError, EmbedderError):
    """An embeddings endpoint stayed unavailable; writes store their memories without a
    vector and embed them later."""

    code = "embedder_unavailable"


class RerankUnavailableError(ModelUnavailableError, RerankError):
    """A rerank endpoint stayed unavailable; search keeps its hybrid order."""

    code = "rerank_unavailable"


class LLMUnavailableError(ModelUnavailableError, LLMError):
    """A chat-completions endpoint stayed unavailable."""

    code = "llm_unavailable"


class LLMOutputError(LLMError):
    """The chat model answered, but no answer was what was asked for (not JSON, or JSON that
    does not fit the schema) after every allowed try.

    ``details`` carries ``attempts``, ``reason`` (the last problem) and ``excerpt`` (the start
    of the last answer).
    """

    code = "llm_invalid_output"


class LLMEmptyAnswerError(LLMOutputError):
    """The chat model answered with no text at all (or only its hidden reasoning)."""

    code = "llm_empty_answer"
