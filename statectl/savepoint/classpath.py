"""The job's classes for decoding (`--classpath JOB.jar`): jars and class folders, read
without a JVM, searched in order as a class loader searches them (`formats.class_files` parses
each class file)."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from statectl.errors import FormatError
from statectl.formats.class_files import MAX_CLASS_BYTES, ClassFile, parse_class

# Class files one class path may read: Kryo reaches a job's few value classes, not its jar;
# parsed, a class takes a few times its bytes, and parsed classes are kept.
MAX_CLASSPATH_BYTES = 1 << 26
_ENCRYPTED = 0x1  # general purpose flag bit 0 (APPNOTE 4.4.4)
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
_METHOD_NAMES = {9: "deflate64", 10: "PKWARE implode", 93: "zstd", 95: "xz", 99: "AES"}


class ClassPath:
    """Jars (zip files, opened on first use) and directories of class files, searched in order
    for a class by binary name, as a class loader does; parsed classes are kept."""

    def __init__(self, entries: Iterable[str | os.PathLike[str]]) -> None:
        self.entries = tuple(Path(entry) for entry in entries)
        for entry in self.entries:  # a mistyped --classpath is an error now, not a miss later
            if not entry.is_dir() and not (entry.is_file() and zipfile.is_zipfile(entry)):
                reason = "not a jar (zip) file" if entry.exists() else "no such file or folder"
                raise FormatError(f"--classpath: {reason}", str(entry))
        self._zips: dict[int, zipfile.ZipFile | None] = {}
        self._classes: dict[str, ClassFile | None] = {}
        self._bytes_read = 0

    def __repr__(self) -> str:
        return f"ClassPath({[str(e) for e in self.entries]!r})"

    def __getstate__(self) -> dict[str, object]:
        """Pickled for a Spark task: the entries only; jars open again on first use there."""
        return {"entries": self.entries, "_zips": {}, "_classes": {}, "_bytes_read": 0}

    def __enter__(self) -> ClassPath:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        for archive in self._zips.values():
            if archive is not None:
                archive.close()
        self._zips.clear()

    def find(self, name: str) -> ClassFile | None:
        """The class of binary name `name` (`a.b.C$D`), None when no entry has it."""
        if name in self._classes:
            return self._classes[name]
        found = self._read(name)
        if found is not None:
            data, source = found
            parsed = parse_class(data, source)
            if parsed.name != name:
                raise FormatError(f"holds class {parsed.name}, not {name}", source)
            found_class: ClassFile | None = parsed
        else:
            found_class = None
        self._classes[name] = found_class
        return found_class

    def load(self, name: str) -> ClassFile:
        """The class of binary name `name`; `FormatError` when the class path lacks it."""
        found = self.find(name)
        if found is None:
            raise FormatError(f"class {name} is not on the class path {self!r}")
        return found

    def hierarchy(self, name: str) -> Iterator[ClassFile]:
        """The class, then its superclasses as far as the class path holds them (up to, not
        including, the first one it lacks, such as java.lang.Object)."""
        seen: set[str] = set()
        current: str | None = name
        while current is not None and current not in seen:
            seen.add(current)
            found = self.find(current)
            if found is None:
                return
            yield found
            current = found.super_name

    def _read(self, name: str) -> tuple[bytes, str] | None:
        if not name or name.startswith(("[", ".")) or "/" in name or ".." in name:
            return None
        relative = name.replace(".", "/") + ".class"
        for index, entry in enumerate(self.entries):
            if entry.is_dir():
                path = entry / relative
                if path.is_file():
                    self._admit(path.stat().st_size, str(path))
                    with path.open("rb") as file:
                        return self._counted(file.read(MAX_CLASS_BYTES + 1), str(path))
                continue
            archive = self._zip(index)
            if archive is None:
                continue
            try:
                info = archive.getinfo(relative)
            except KeyError:
                continue
            return self._read_entry(archive, info, f"{entry}!/{relative}")
        return None

    def _read_entry(
        self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, source: str
    ) -> tuple[bytes, str]:
        if info.flag_bits & _ENCRYPTED:
            raise FormatError("encrypted jar entry (statectl reads no passwords)", source)
        if info.compress_type not in _METHODS:
            method = _METHOD_NAMES.get(info.compress_type, "unknown")
            raise FormatError(
                f"jar entry compressed with method {info.compress_type} ({method}), which "
                "statectl cannot read (stored, deflate, bzip2, lzma)",
                source,
            )
        self._admit(info.file_size, source)
        try:
            with archive.open(info) as stream:  # a size that lies: read one byte past the limit
                data = stream.read(MAX_CLASS_BYTES + 1)
        except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
            raise FormatError(f"cannot read the jar entry: {exc}", source) from None
        return self._counted(data, source)

    def _admit(self, size: int, source: str) -> None:
        """Refuse a class file larger than any javac writes, or past the class path's budget."""
        if size > MAX_CLASS_BYTES:
            raise FormatError(
                f"class file of {size} bytes, more than the {MAX_CLASS_BYTES} statectl reads",
                source,
            )
        if self._bytes_read + size > MAX_CLASSPATH_BYTES:
            raise FormatError(
                f"reading it would take the class files read past {MAX_CLASSPATH_BYTES} bytes",
                source,
            )

    def _counted(self, data: bytes, source: str) -> tuple[bytes, str]:
        self._admit(len(data), source)
        self._bytes_read += len(data)
        return data, source

    def _zip(self, index: int) -> zipfile.ZipFile | None:
        if index not in self._zips:
            entry = self.entries[index]
            if not entry.is_file():
                self._zips[index] = None
                return None
            try:
                self._zips[index] = zipfile.ZipFile(entry)
            except (zipfile.BadZipFile, OSError) as exc:
                raise FormatError(f"not a jar (zip) file: {exc}", str(entry)) from None
        return self._zips[index]
