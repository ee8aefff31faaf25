from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("node", "cluster_id", "protocol", "fingerprint")
    NODE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    node: int
    cluster_id: str
    protocol: str
    fingerprint: str
    def __init__(self, node: _Optional[int] = ..., cluster_id: _Optional[str] = ..., protocol: _Optional[str] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class Write(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class TransactRequest(_message.Message):
    __slots__ = ("reads", "writes", "trying_for_us")
    READS_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    TRYING_FOR_US_FIELD_NUMBER: _ClassVar[int]
    reads: _containers.RepeatedScalarFieldContainer[bytes]
    writes: _containers.RepeatedCompositeFieldContainer[Write]
    trying_for_us: int
    def __init__(self, reads: _Optional[_Iterable[bytes]] = ..., writes: _Optional[_Iterable[_Union[Write, _Mapping]]] = ..., trying_for_us: _Optional[int] = ...) -> None: ...

class TransactReply(_message.Message):
    __slots__ = ("committed", "aborted", "reads")
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    committed: Committed
    aborted: Aborted
    reads: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, committed: _Optional[_Union[Committed, _Mapping]] = ..., aborted: _Optional[_Union[Aborted, _Mapping]] = ..., reads: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class Committed(_message.Message):
    __slots__ = ("commit_ts",)
    COMMIT_TS_FIELD_NUMBER: _ClassVar[int]
    commit_ts: int
    def __init__(self, commit_ts: _Optional[int] = ...) -> None: ...

class Aborted(_message.Message):
    __slots__ = ("reason", "description", "retryable")
    REASON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    description: str
    retryable: bool
    def __init__(self, reason: _Optional[str] = ..., description: _Optional[str] = ..., retryable: _Optional[bool] = ...) -> None: ...

class SessionRequest(_message.Message):
    __slots__ = ("begin", "get", "put", "delete", "commit", "abort")
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    GET_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    begin: Begin
    get: Get
    put: Put
    delete: Delete
    commit: Commit
    abort: Abort
    def __init__(self, begin: _Optional[_Union[Begin, _Mapping]] = ..., get: _Optional[_Union[Get, _Mapping]] = ..., put: _Optional[_Union[Put, _Mapping]] = ..., delete: _Optional[_Union[Delete, _Mapping]] = ..., commit: _Optional[_Union[Commit, _Mapping]] = ..., abort: _Optional[_Union[Abort, _Mapping]] = ...) -> None: ...

class Begin(_message.Message):
    __slots__ = ("read_only", "trying_for_us")
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    TRYING_FOR_US_FIELD_NUMBER: _ClassVar[int]
    read_only: bool
    trying_for_us: int
    def __init__(self, read_only: _Optional[bool] = ..., trying_for_us: _Optional[int] = ...) -> None: ...

class Get(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    def __init__(self, key: _Optional[bytes] = ...) -> None: ...

class Put(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class Delete(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    def __init__(self, key: _Optional[bytes] = ...) -> None: ...

class Commit(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Abort(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionReply(_message.Message):
    __slots__ = ("begun", "value", "written", "committed", "aborted")
    BEGUN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    begun: Begun
    value: KeyValue
    written: Written
    committed: Committed
    aborted: Aborted
    def __init__(self, begun: _Optional[_Union[Begun, _Mapping]] = ..., value: _Optional[_Union[KeyValue, _Mapping]] = ..., written: _Optional[_Union[Written, _Mapping]] = ..., committed: _Optional[_Union[Committed, _Mapping]] = ..., aborted: _Optional[_Union[Aborted, _Mapping]] = ...) -> None: ...

class Begun(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: int
    def __init__(self, snapshot: _Optional[int] = ...) -> None: ...

class Written(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
