"""Java class files read without a JVM (statectl/formats/class_files.py): a real class file javac
wrote (the values job's, from the compile cache), class files built here byte by byte (every
constant pool tag, generic signatures, annotations), jars and directories on a `ClassPath`, and
bad input: a cut or foreign file is a FormatError naming it."""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from statectl.errors import FormatError
from statectl.formats.class_files import (
    ACC_ENUM,
    ACC_FINAL,
    ACC_PRIVATE,
    ACC_PUBLIC,
    ACC_STATIC,
    ACC_SUPER,
    ACC_SYNTHETIC,
    ACC_TRANSIENT,
    CLASS,
    DOUBLE,
    DYNAMIC,
    FIELDREF,
    FLOAT,
    INTEGER,
    INTERFACE_METHODREF,
    INVOKE_DYNAMIC,
    LONG,
    MAX_CLASS_BYTES,
    METHOD_HANDLE,
    METHOD_TYPE,
    METHODREF,
    MODULE,
    NAME_AND_TYPE,
    PACKAGE,
    STRING,
    UTF8,
    TypeSignature,
    field_type_name,
    parse_class,
    parse_field_signature,
)
from statectl.formats.java_io import encode_modified_utf8
from statectl.savepoint import classpath
from statectl.savepoint.classpath import ClassPath

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "flink"
OPAQUE = "statectl.values.Model$Opaque"

# (flags, name, descriptor, signature or None, annotation descriptors)
FieldSpec = tuple[int, str, str, str | None, tuple[str, ...]]


def cached_values_classes() -> Path | None:
    """A compiled values job (tests/flink/harness.py::compile_values) in the cache, newest first."""
    found = [
        d
        for d in CACHE.glob("values-classes-*")
        if (d / ".complete").exists() and (d / "statectl/values/Model$Opaque.class").is_file()
    ]
    return max(found, key=lambda d: d.stat().st_mtime) if found else None


def values_classes() -> Path:
    """The values job's classes: the cache, else compiled now (javac and the Flink jars)."""
    cached = cached_values_classes()
    if cached is not None:
        return cached
    from tests.flink import harness

    try:
        return harness.compile_values("2.3.0")
    except Exception as exc:  # no JDK, no Flink jars: nothing to read
        pytest.skip(f"the values job's classes cannot be compiled here: {exc}")


# Tests reading the values job's classes need javac only when the compile cache is empty.
NEEDS_JAVAC = [] if cached_values_classes() is not None else [pytest.mark.flink]


class _Pool:
    """A constant pool being built: entries deduplicated, Long/Double taking two slots."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.count = 1
        self.known: dict[tuple[int, object], int] = {}

    def add(self, tag: int, body: bytes, key: object = None) -> int:
        if key is not None and (tag, key) in self.known:
            return self.known[(tag, key)]
        index = self.count
        self.data += bytes((tag,)) + body
        self.count += 2 if tag in (LONG, DOUBLE) else 1
        if key is not None:
            self.known[(tag, key)] = index
        return index

    def utf8(self, text: str) -> int:
        data = encode_modified_utf8(text)
        return self.add(UTF8, struct.pack(">H", len(data)) + data, text)

    def cls(self, name: str) -> int:
        return self.add(CLASS, struct.pack(">H", self.utf8(name.replace(".", "/"))), name)


def _attributes(pool: _Pool, signature: str | None, annotations: Iterable[str]) -> bytes:
    attrs = []
    if signature is not None:
        attrs.append(struct.pack(">HIH", pool.utf8("Signature"), 2, pool.utf8(signature)))
    annotations = list(annotations)
    if annotations:
        body = struct.pack(">H", len(annotations))
        for descriptor in annotations:
            body += struct.pack(">HH", pool.utf8(descriptor), 0)
        attrs.append(struct.pack(">HI", pool.utf8("RuntimeVisibleAnnotations"), len(body)) + body)
    return struct.pack(">H", len(attrs)) + b"".join(attrs)


def class_bytes(
    name: str,
    super_name: str | None = "java.lang.Object",
    fields: Iterable[FieldSpec] = (),
    *,
    access: int = ACC_PUBLIC | ACC_SUPER,
    interfaces: Iterable[str] = (),
    annotations: Iterable[str] = (),
    every_tag: bool = False,
    padding: int = 0,
) -> bytes:
    """A class file as javac lays it out (version 61, Java 17), with these fields; `every_tag`
    adds one constant of each kind of §4.4, `padding` at least that many bytes of string
    constants (a hostile class file's bulk)."""
    pool = _Pool()
    for _ in range(-(-padding // 65538)):
        pool.add(UTF8, b"\xff\xff" + b"x" * 65535)
    this = pool.cls(name)
    parent = pool.cls(super_name) if super_name else 0
    ifaces = [pool.cls(i) for i in interfaces]
    if every_tag:
        nat = pool.add(NAME_AND_TYPE, struct.pack(">HH", pool.utf8("x"), pool.utf8("I")))
        pool.add(INTEGER, struct.pack(">i", -7))
        pool.add(FLOAT, struct.pack(">f", 1.5))
        pool.add(LONG, struct.pack(">q", 1 << 40))
        pool.add(DOUBLE, struct.pack(">d", -2.25))
        pool.add(STRING, struct.pack(">H", pool.utf8("\u00e9\U0001d11e\x00")))
        field_ref = pool.add(FIELDREF, struct.pack(">HH", this, nat))
        pool.add(METHODREF, struct.pack(">HH", this, nat))
        pool.add(INTERFACE_METHODREF, struct.pack(">HH", this, nat))
        pool.add(METHOD_HANDLE, struct.pack(">BH", 1, field_ref))
        pool.add(METHOD_TYPE, struct.pack(">H", pool.utf8("()V")))
        pool.add(DYNAMIC, struct.pack(">HH", 0, nat))
        pool.add(INVOKE_DYNAMIC, struct.pack(">HH", 0, nat))
        pool.add(MODULE, struct.pack(">H", pool.utf8("m")))
        pool.add(PACKAGE, struct.pack(">H", pool.utf8("a/b")))
    members = b""
    fields = list(fields)
    for flags, field_name, descriptor, signature, field_annotations in fields:
        members += struct.pack(">HHH", flags, pool.utf8(field_name), pool.utf8(descriptor))
        members += _attributes(pool, signature, field_annotations)
    class_attributes = _attributes(pool, None, annotations)
    out = struct.pack(">IHHH", 0xCAFEBABE, 0, 61, pool.count) + pool.data
    out += struct.pack(">HHHH", access, this, parent, len(ifaces))
    out += b"".join(struct.pack(">H", i) for i in ifaces)
    out += struct.pack(">H", len(fields)) + members
    out += struct.pack(">H", 0)  # methods
    return out + class_attributes


def field(name: str, descriptor: str, flags: int = ACC_PRIVATE, signature: str | None = None,
          annotations: tuple[str, ...] = ()) -> FieldSpec:  # fmt: skip
    return (flags, name, descriptor, signature, annotations)


def write_jar(path: Path, classes: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        for name, data in classes.items():
            jar.writestr(name.replace(".", "/") + ".class", data)
    return path


# --- a real class file ---------------------------------------------------------------------------


@pytest.mark.parametrize("_", [pytest.param(None, marks=NEEDS_JAVAC)])
def test_a_class_javac_wrote(_: None, tmp_path: Path) -> None:
    classes = values_classes()
    data = (classes / "statectl/values/Model$Opaque.class").read_bytes()
    parsed = parse_class(data, "Model$Opaque.class")
    assert parsed.name == OPAQUE
    assert parsed.super_name == "java.lang.Object"
    assert parsed.is_final and not parsed.is_interface and not parsed.is_enum
    assert parsed.major_version >= 52
    assert [(f.name, f.type_name, f.is_final, f.is_static) for f in parsed.fields] == [
        ("label", "java.lang.String", True, False),
        ("amount", "java.lang.Long", True, False),
        ("codes", "[I", True, False),
    ]
    assert {m.name for m in parsed.methods} >= {"<init>", "toString"}
    # the same class through a ClassPath over the directory and over a jar of it
    jar = write_jar(tmp_path / "job.jar", {OPAQUE: data})
    for entry in (classes, jar):
        with ClassPath([entry]) as path:
            assert path.load(OPAQUE).fields == parsed.fields
            assert [c.name for c in path.hierarchy(OPAQUE)] == [OPAQUE]
    # generic signatures and enum constants of the other classes of the job
    with ClassPath([classes]) as path:
        pojo = {f.name: f for f in path.load("statectl.values.Model$Pojo").fields}
        assert pojo["tags"].signature == "Ljava/util/List<Ljava/lang/String;>;"
        assert pojo["ignored"].is_transient and pojo["STATIC_IGNORED"].is_static
        assert path.load("statectl.values.Model$Color").enum_constants() == (
            "RED",
            "GREEN",
            "BLUE",
            "VIOLET",
        )
        dog = [c.name for c in path.hierarchy("statectl.values.Model$Dog")]
        assert dog == ["statectl.values.Model$Dog", "statectl.values.Model$Animal"]
        tagged = {f.name: f for f in path.load("statectl.values.Model$Tagged").fields}
        assert tagged["groups"].signature is not None
        assert parse_field_signature(tagged["groups"].signature) == TypeSignature(
            "class",
            "java.util.Map",
            (
                TypeSignature("class", "java.lang.String"),
                TypeSignature(
                    "class", "java.util.List", (TypeSignature("class", "java.lang.Integer"),)
                ),
            ),
        )
        assert tagged["numbers"].signature == "Ljava/util/List<+Ljava/lang/Number;>;"


# --- built class files ---------------------------------------------------------------------------


def test_every_constant_kind_flags_signatures_and_annotations() -> None:
    data = class_bytes(
        "a.b.C$D",
        "a.b.Base",
        [
            field("n", "I", ACC_PUBLIC | ACC_TRANSIENT),
            field("this$0", "La/b/C;", ACC_FINAL | ACC_SYNTHETIC),
            field("ONE", "La/b/C$D;", ACC_PUBLIC | ACC_STATIC | ACC_FINAL | ACC_ENUM),
            field(
                "m",
                "Ljava/util/Map;",
                signature="Ljava/util/Map<Ljava/lang/String;[I>;",
                annotations=("Lcom/esotericsoftware/kryo/NotNull;",),
            ),
        ],
        interfaces=["java.io.Serializable"],
        annotations=["Lx/Y;"],
        every_tag=True,
    )
    parsed = parse_class(data, "C$D.class")
    assert (parsed.name, parsed.super_name, parsed.interfaces) == (
        "a.b.C$D",
        "a.b.Base",
        ("java.io.Serializable",),
    )
    assert parsed.annotations == ("Lx/Y;",)
    n, this, one, m = parsed.fields
    assert n.is_transient and not n.is_static and n.type_name == "int"
    assert this.is_synthetic and this.type_name == "a.b.C"
    assert one.is_enum_constant and one.is_static
    assert m.annotations == ("Lcom/esotericsoftware/kryo/NotNull;",)
    assert parse_field_signature(m.signature or "") == TypeSignature(
        "class",
        "java.util.Map",
        (
            TypeSignature("class", "java.lang.String"),
            TypeSignature("array", "", (TypeSignature("base", "int"),)),
        ),
    )
    values = {c.tag: c.value for c in parsed.constant_pool.entries if c is not None}
    assert values[INTEGER] == -7 and values[FLOAT] == 1.5 and values[LONG] == 1 << 40
    assert values[DOUBLE] == -2.25
    assert parsed.constant_pool.utf8(values[STRING]) == "\u00e9\U0001d11e\x00"
    assert {METHOD_HANDLE, METHOD_TYPE, DYNAMIC, INVOKE_DYNAMIC, MODULE, PACKAGE} <= set(values)
    # the slot after a Long or Double is empty
    entries = parsed.constant_pool.entries
    assert all(
        entries[i + 1] is None for i, c in enumerate(entries) if c and c.tag in (LONG, DOUBLE)
    )


@pytest.mark.parametrize(
    ("descriptor", "name"),
    [
        ("I", "int"),
        ("Z", "boolean"),
        ("Ljava/lang/String;", "java.lang.String"),
        ("La/B$C;", "a.B$C"),
        ("[I", "[I"),
        ("[[J", "[[J"),
        ("[Ljava/lang/String;", "[Ljava.lang.String;"),
    ],
)
def test_field_descriptors_as_class_names(descriptor: str, name: str) -> None:
    assert field_type_name(descriptor) == name


@pytest.mark.parametrize("descriptor", ["", "L;", "Q", "[", "[Lx", "V"])
def test_bad_descriptors(descriptor: str) -> None:
    with pytest.raises(FormatError):
        field_type_name(descriptor)


@pytest.mark.parametrize(
    ("signature", "expected"),
    [
        ("TT;", TypeSignature("var", "T")),
        (
            "Ljava/util/List<*>;",
            TypeSignature("class", "java.util.List", (TypeSignature("wildcard", "*"),)),
        ),
        (
            "Ljava/util/List<+Ljava/lang/Number;>;",
            TypeSignature(
                "class",
                "java.util.List",
                (TypeSignature("wildcard", "+", (TypeSignature("class", "java.lang.Number"),)),),
            ),
        ),
        ("[TT;", TypeSignature("array", "", (TypeSignature("var", "T"),))),
        (
            "La/Outer<TT;>.Inner<Ljava/lang/String;>;",
            TypeSignature("class", "a.Outer$Inner", (TypeSignature("class", "java.lang.String"),)),
        ),
    ],
)
def test_generic_field_signatures(signature: str, expected: TypeSignature) -> None:
    assert parse_field_signature(signature) == expected


@pytest.mark.parametrize("signature", ["", "T", "Ljava/util/List<", "Lx;y", "X"])
def test_bad_signatures(signature: str) -> None:
    with pytest.raises(FormatError):
        parse_field_signature(signature)


def test_class_path_order_hierarchy_and_missing_classes(tmp_path: Path) -> None:
    base = class_bytes("p.Base", fields=[field("a", "I")])
    child = class_bytes("p.Child", "p.Base", [field("b", "J")])
    other_child = class_bytes("p.Child", "p.Base", [field("c", "J")])
    (tmp_path / "dir" / "p").mkdir(parents=True)
    (tmp_path / "dir" / "p" / "Child.class").write_bytes(other_child)
    jar = write_jar(tmp_path / "job.jar", {"p.Base": base, "p.Child": child})
    with pytest.raises(FormatError, match="no such file or folder"):
        ClassPath([jar, tmp_path / "absent.jar"])  # refused as given, not missed later
    with ClassPath([jar, tmp_path / "dir"]) as path:
        assert [f.name for f in path.load("p.Child").fields] == ["b"]  # the first entry wins
        assert [c.name for c in path.hierarchy("p.Child")] == ["p.Child", "p.Base"]
        assert path.find("p.Nope") is None and path.find("java.lang.String") is None
        assert path.find("[I") is None and path.find("") is None
        with pytest.raises(FormatError, match="not on the class path"):
            path.load("p.Nope")
    with ClassPath([tmp_path / "dir"]) as path:
        assert [c.name for c in path.hierarchy("p.Child")] == ["p.Child"]  # Base is not there
    # a file under the wrong name
    write_jar(tmp_path / "wrong.jar", {"p.Other": base})
    with ClassPath([tmp_path / "wrong.jar"]) as path, pytest.raises(FormatError, match=r"p\.Base"):
        path.find("p.Other")


# --- bad input -----------------------------------------------------------------------------------


def test_truncated_class_files_are_format_errors_naming_the_file() -> None:
    data = class_bytes("a.B", fields=[field("x", "I", signature=None)], every_tag=True)
    for cut in range(len(data)):
        with pytest.raises(FormatError) as raised:
            parse_class(data[:cut], "B.class")
        assert raised.value.source == "B.class"
        assert str(raised.value).startswith("B.class: ")
    with pytest.raises(FormatError, match="after the class file's end"):
        parse_class(data + b"\0", "B.class")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "bad magic"),
        (b"PK\x03\x04" + b"\0" * 40, "bad magic"),
        (bytes.fromhex("cafebabe0000003d0002") + b"\x02\0\0", "constant pool tag 2"),
        (bytes.fromhex("cafebabe0000003d0002") + b"\x05" + b"\0" * 8, "8-byte constant"),
    ],
)
def test_foreign_bytes_are_format_errors(data: bytes, reason: str) -> None:
    with pytest.raises(FormatError, match=reason) as raised:
        parse_class(data, "x.class")
    assert raised.value.source == "x.class"


def test_bad_constant_references_and_bad_jars(tmp_path: Path) -> None:
    data = bytearray(class_bytes("a.B"))
    # this_class pointing at a Utf8 entry instead of a Class entry: the pool starts at offset
    # 10, this_class follows it and the access flags
    pool = _Pool()
    pool.cls("a.B")
    pool.cls("java.lang.Object")
    this_at = 10 + len(pool.data) + 2
    data[this_at : this_at + 2] = struct.pack(">H", 1)  # entry 1 is the Utf8 "a/B"
    with pytest.raises(FormatError, match="not an entry of tag 7"):
        parse_class(bytes(data), "B.class")
    (tmp_path / "bad.jar").write_bytes(b"not a zip")
    with pytest.raises(FormatError, match="not a jar") as raised:
        ClassPath([tmp_path / "bad.jar"])
    assert raised.value.source == str(tmp_path / "bad.jar")
    write_jar(tmp_path / "cut.jar", {"a.B": class_bytes("a.B")[:20]})
    with ClassPath([tmp_path / "cut.jar"]) as path, pytest.raises(FormatError) as raised:
        path.find("a.B")
    assert raised.value.source == f"{tmp_path / 'cut.jar'}!/a/B.class"


# --- hostile jars --------------------------------------------------------------------------------


def test_a_class_file_larger_than_any_javac_writes_is_refused_naming_jar_and_entry(
    tmp_path: Path,
) -> None:
    from tests.formats.test_bombs import bounded

    big = class_bytes("p.Big", padding=58 << 20)  # a hostile jar's: 58 MiB of constants
    jar = write_jar(tmp_path / "big.jar", {"p.Big": big}, zipfile.ZIP_DEFLATED)
    assert jar.stat().st_size < 1 << 20

    def read() -> None:
        with ClassPath([jar]) as path:
            try:
                path.find("p.Big")
            except FormatError as exc:  # the whole line: `bounded` shows the message alone
                raise FormatError(str(exc)) from None

    assert bounded(read) == (
        f"FormatError: {jar}!/p/Big.class: class file of {len(big)} bytes, more than the "
        f"{MAX_CLASS_BYTES} statectl reads"
    )
    (tmp_path / "dir" / "p").mkdir(parents=True)
    (tmp_path / "dir" / "p" / "Big.class").write_bytes(big)
    with ClassPath([tmp_path / "dir"]) as path, pytest.raises(FormatError, match="more than"):
        path.find("p.Big")


def test_the_class_files_one_class_path_reads_are_bounded_in_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A jar of many class files each under the limit (56 of 58 MiB of constants grew to
    3 GB parsed) stops at the class path's budget."""
    monkeypatch.setattr(classpath, "MAX_CLASSPATH_BYTES", 3 * 70_000)
    classes = {f"p.C{n}": class_bytes(f"p.C{n}", padding=60_000) for n in range(5)}
    jar = write_jar(tmp_path / "many.jar", classes, zipfile.ZIP_DEFLATED)
    with ClassPath([jar]) as path:
        for n in range(3):
            assert path.find(f"p.C{n}") is not None
        with pytest.raises(FormatError) as raised:
            path.find("p.C3")
        assert str(raised.value) == (
            f"{jar}!/p/C3.class: reading it would take the class files read past {3 * 70_000} bytes"
        )
        assert path.find("p.C0") is not None  # classes read before stay


def _patch_central_directory(jar: Path, entry: str, flag_bits: int, method: int) -> None:
    """Give `entry` these general-purpose flags and compression method in the central
    directory (what zipfile reads them from)."""
    data = bytearray(jar.read_bytes())
    name = entry.encode()
    at = data.index(b"PK\x01\x02")
    while data[at + 46 : at + 46 + len(name)] != name:
        at = data.index(b"PK\x01\x02", at + 4)
    struct.pack_into("<HH", data, at + 8, flag_bits, method)
    jar.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("flag_bits", "method", "problem"),
    [
        (1, 8, "encrypted jar entry (statectl reads no passwords)"),
        (1, 99, "encrypted jar entry (statectl reads no passwords)"),
        (
            0,
            9,
            "jar entry compressed with method 9 (deflate64), which statectl cannot read "
            "(stored, deflate, bzip2, lzma)",
        ),
    ],
)
def test_encrypted_or_deflate64_entries_are_refused_naming_jar_and_entry(
    tmp_path: Path, flag_bits: int, method: int, problem: str
) -> None:
    jar = write_jar(tmp_path / "odd.jar", {"p.X": class_bytes("p.X")})
    _patch_central_directory(jar, "p/X.class", flag_bits, method)
    with ClassPath([jar]) as path, pytest.raises(FormatError) as raised:
        path.find("p.X")
    assert str(raised.value) == f"{jar}!/p/X.class: {problem}"
