"""Reading a shared model.tar.gz is bounded (issue 22, items 8 and 11).

The probes, rebuilt here as hostile archives in tmp_path and run through the CLI: an 8 MiB member
name gave 8.6 MB of error output; 300,000 empty members took 355 s; a 4 GiB member was read whole;
data after the tar's end was still decompressed; a second `config.json` silently won.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from ipuflow.commands.cli import run
from ipuflow.experiment.archive import extraction as archive_extraction
from ipuflow.experiment.archive.extraction import MAX_MEMBERS


def members_of(trained_run):
    """The genuine archive's members, as (TarInfo, bytes) pairs."""
    pairs = []
    with tarfile.open(trained_run / "model.tar.gz") as archive:
        for member in archive.getmembers():
            data = archive.extractfile(member).read() if member.isfile() else None
            pairs.append((member, data))
    return pairs


def tar_bytes(pairs, format=tarfile.GNU_FORMAT) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=format) as archive:
        for member, data in pairs:
            archive.addfile(member, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def write_gz(path, data: bytes):
    path.write_bytes(gzip.compress(data, compresslevel=1))
    return path


def refusal(capsys, archive, tiny_data):
    """Evaluate `archive` through the CLI: (exit code, the whole stderr)."""
    capsys.readouterr()
    code = run(["evaluate", str(archive), str(tiny_data / "test.jsonl")])
    return code, " ".join(capsys.readouterr().err.split())


def file_member(name: str, data: bytes):
    member = tarfile.TarInfo(name)
    member.size = len(data)
    return member, data


def test_a_genuine_archive_still_loads(trained_run, tiny_data, capsys):
    code, err = refusal(capsys, trained_run / "model.tar.gz", tiny_data)
    assert code == 0, err


@pytest.mark.parametrize("format", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_a_huge_member_name_is_refused_before_it_is_read_and_the_error_stays_short(format, trained_run, tiny_data,
                                                                                  tmp_path, capsys):
    name = "vocabulary/" + "n" * (8 * 2**20)
    archive = write_gz(tmp_path / "long_name.tar.gz", tar_bytes(members_of(trained_run) + [file_member(name, b"x")], format))
    code, err = refusal(capsys, archive, tiny_data)
    assert code == 2 and "is not a readable model archive" in err and "extended header" in err, err[:2000]
    assert len(err) < 2000


def test_a_long_member_name_is_refused_and_shown_cut(trained_run, tiny_data, tmp_path, capsys):
    name = "vocabulary/" + "n" * 5000
    archive = write_gz(tmp_path / "long_name.tar.gz", tar_bytes(members_of(trained_run) + [file_member(name, b"x")]))
    code, err = refusal(capsys, archive, tiny_data)
    assert code == 2 and "longer than 1024 characters" in err and "5,011 characters" in err and len(err) < 2000, err


@pytest.mark.parametrize("kind", ["link", "oversized"])
def test_a_refused_members_name_is_shown_whole(kind, trained_run, tiny_data, tmp_path, capsys):
    """Issue 31.8: a name within the name limit was cut, so the error no longer named the file."""
    name = "pretrained/0/" + "deep/" * 40 + "the_member_to_look_at.json"
    if kind == "link":
        member = tarfile.TarInfo(name)
        member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
        planted = (member, None)
    else:
        planted = file_member(name, b" " * (archive_extraction.MAX_JSON_BYTES + 1))
    archive = write_gz(tmp_path / "refused.tar.gz", tar_bytes(members_of(trained_run) + [planted]))
    code, err = refusal(capsys, archive, tiny_data)
    assert code == 2 and repr(name) in err, err


def test_too_many_members_are_refused(trained_run, tiny_data, tmp_path, capsys):
    empties = [file_member(f"vocabulary/e{index}", b"") for index in range(MAX_MEMBERS + 1)]
    archive = write_gz(tmp_path / "many.tar.gz", tar_bytes(members_of(trained_run) + empties))
    code, err = refusal(capsys, archive, tiny_data)
    assert code == 2 and f"more than {MAX_MEMBERS:,} members" in err, err


def test_a_member_claiming_gigabytes_is_refused_from_its_header(trained_run, tiny_data, tmp_path, capsys):
    header = tarfile.TarInfo("vocabulary/tokens.txt")
    header.size = 4 * 2**30
    data = tar_bytes(members_of(trained_run)) [:-1024 * 10]  # cut the end marker and padding off
    hostile = header.tobuf(tarfile.GNU_FORMAT) + b"a" * 4096  # the header promises 4 GiB; none of it is needed
    archive = write_gz(tmp_path / "big_member.tar.gz", data.rstrip(b"\0") + b"\0" * (-len(data.rstrip(b"\0")) % 512) + hostile)
    code, err = refusal(capsys, archive, tiny_data)
    assert code == 2 and "4,294,967,296 bytes, more than the 268,435,456 allowed" in err, err


def test_the_total_size_limit_is_the_environments_to_set(trained_run, tiny_data, monkeypatch, capsys):
    monkeypatch.setenv("IPUFLOW_ARCHIVE_MAX_SIZE", "1KB")
    code, err = refusal(capsys, trained_run / "model.tar.gz", tiny_data)
    assert code == 2 and "size limit of 1,024 bytes" in err and "IPUFLOW_ARCHIVE_MAX_SIZE" in err, err


def test_data_after_the_end_of_the_tar_is_refused_unread(trained_run, tiny_data, tmp_path, monkeypatch, capsys):
    reads = []
    original = archive_extraction._check_end

    def spy(stream):
        reads.append(stream.count)
        return original(stream)

    monkeypatch.setattr(archive_extraction, "_check_end", spy)
    whole = tar_bytes(members_of(trained_run))
    archive = write_gz(tmp_path / "trailing.tar.gz", whole + b"hidden data " * (4 * 2**20))  # 48 MiB after the end
    code, err = refusal(capsys, archive, tiny_data)
    assert code == 2 and "data after the tar's end-of-archive marker" in err, err
    assert reads and reads[0] < len(whole) + 2**20  # the tar was read up to its end, not the 48 MiB after it


def test_a_member_named_twice_is_refused(trained_run, tiny_data, tmp_path, capsys):
    pairs = members_of(trained_run)
    config = json.loads(next(data for member, data in pairs if member.name == "config.json"))
    config["model"]["dropout"] = 0.9
    second = json.dumps(config).encode()
    for name in ("config.json", "./config.json"):
        archive = write_gz(tmp_path / "twice.tar.gz", tar_bytes(pairs + [file_member(name, second)]))
        code, err = refusal(capsys, archive, tiny_data)
        assert code == 2 and "'config.json' twice" in err, err


def test_a_json_member_past_its_limit_is_refused(trained_run, tiny_data, tmp_path, capsys):
    pairs = [(member, data) for member, data in members_of(trained_run) if member.name != "meta.json"]
    archive = write_gz(tmp_path / "big_meta.tar.gz", tar_bytes(pairs + [file_member("meta.json", b" " * (17 * 2**20))]))
    code, err = refusal(capsys, archive, tiny_data)
    assert code == 2 and "'meta.json' holds 17,825,792 bytes, more than the 16,777,216 allowed for a JSON file" in err, err


def test_weights_larger_than_the_free_disk_are_refused_before_extraction(trained_run, tiny_data, tmp_path, monkeypatch,
                                                                        capsys):
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(archive_extraction.shutil, "disk_usage", lambda path: usage(2**30, 2**30 - 4096, 4096))
    code, err = refusal(capsys, trained_run / "model.tar.gz", tiny_data)
    assert code == 1 and "needs" in err and "has 4,096 free" in err and "TMPDIR" in err, err
