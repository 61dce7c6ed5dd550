"""What may not cross machines (connect_runtime.locality): mount tables as /proc/self/mountinfo prints them."""

from __future__ import annotations

from pathlib import Path

from connect_runtime.locality import LocalPath, local_paths, mount_of, parse_mountinfo, problems

MOUNTINFO = """\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
30 22 0:26 / /mnt/nfs rw,relatime shared:5 - nfs4 filer:/export rw,vers=4.2,local_lock=none
31 22 0:27 / /mnt/nfs-nolock rw,relatime - nfs filer:/old rw,vers=3,nolock
32 22 0:28 / /mnt/smb rw,relatime - cifs //nas/share rw,vers=3.1.1
33 22 0:29 / /mnt/lustre rw - lustre mds@tcp:/fs rw,flock
34 22 0:30 / /mnt/lustre-local rw - lustre mds@tcp:/fs2 rw,localflock
35 22 0:31 / /mnt/ceph rw - ceph 10.0.0.1:/ rw,name=admin
36 22 0:32 / /tmp rw,nosuid - tmpfs tmpfs rw
37 30 0:33 / /mnt/nfs/local\\040dir rw - ext4 /dev/vdb rw
"""
MOUNTS = parse_mountinfo(MOUNTINFO)


def test_parse_reads_type_source_and_options_and_unescapes_spaces() -> None:
    by_point = {m.mount_point: m for m in MOUNTS}
    assert by_point["/mnt/nfs"].fstype == "nfs4" and by_point["/mnt/nfs"].source == "filer:/export"
    assert "local_lock=none" in by_point["/mnt/nfs"].options
    assert "/mnt/nfs/local dir" in by_point
    assert parse_mountinfo("garbage line\n\n") == []


def test_the_longest_mount_point_above_a_path_holds_it_even_before_it_exists() -> None:
    assert mount_of("/mnt/nfs/data/out", MOUNTS).fstype == "nfs4"  # type: ignore[union-attr]
    assert mount_of("/mnt/nfs/local dir/x", MOUNTS).fstype == "ext4"  # type: ignore[union-attr]
    assert mount_of("/mnt/nfsother/x", MOUNTS).mount_point == "/"  # type: ignore[union-attr]
    assert mount_of("/srv/not/yet/there", MOUNTS).mount_point == "/"  # type: ignore[union-attr]


def test_a_symlink_is_judged_by_where_it_points(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/mnt")
    mounts = [*MOUNTS, *parse_mountinfo(f"40 22 0:40 / {tmp_path} rw - ext4 /dev/vdc rw\n")]
    assert mount_of(tmp_path / "link" / "nfs" / "out", mounts).fstype == "nfs4"  # type: ignore[union-attr]


def test_which_paths_a_run_has() -> None:
    file_sink = {"name": "a", "connector.class": "connect_runtime.connectors.files.FileSink", "directory": "/d"}
    assert local_paths("sqlite:////var/s.db", file_sink) == [
        LocalPath("the embedded store", "/var/s.db", store=True), LocalPath("the FileSink directory", "/d", flock=True)]
    assert local_paths("kafka://b:9092", file_sink) == [LocalPath("the FileSink directory", "/d", flock=True)]
    lake = {"connector.class": "connect_runtime.connectors.lake.ParquetSink"}
    assert local_paths("kafka://b:9092", {**lake, "path": "s3://bucket/lake"}) == []
    assert local_paths("kafka://b:9092", {**lake, "path": "memory://lake"}) == []
    assert local_paths("kafka://b:9092", {**lake, "path": "file:///data/lake"}) == [
        LocalPath("the ParquetSink path", "/data/lake")]
    source = {"connector.class": "connect_runtime.connectors.files.DirectorySource", "directory": "/in"}
    assert local_paths("kafka://b:9092", source) == [LocalPath("the DirectorySource directory", "/in")]
    sql = {"connector.class": "connect_runtime.connectors.sql.SqlSink", "connection.url": "sqlite:////db/x.db"}
    assert local_paths("kafka://b:9092", sql) == [LocalPath("the SqlSink database", "/db/x.db")]
    pg = {**sql, "connection.url": "postgresql+psycopg://u:pw@h/db"}
    assert local_paths("kafka://b:9092", pg) == []
    datagen = {"connector.class": "connect_runtime.connectors.datagen.DataGenSource", "directory": "/ignored"}
    assert local_paths("kafka://b:9092", datagen) == []


def test_verdicts_name_the_path_its_filesystem_and_the_fix() -> None:
    def verdict(path: str, *, flock: bool = False, store: bool = False) -> list[str]:
        return problems([LocalPath("the X", path, flock=flock, store=store)], MOUNTS)

    assert verdict("/mnt/nfs/out") == [] and verdict("/mnt/smb/in") == [] and verdict("/mnt/ceph/x") == []
    [local] = verdict("/srv/out")
    assert "/srv/out" in local and "ext4 at /" in local and "own disk" in local and "shared filesystem" in local
    assert "own disk" in verdict("/tmp/out")[0]  # tmpfs is this machine's memory
    for shared_with_flock in ("/mnt/nfs/o", "/mnt/ceph/o", "/mnt/lustre/o"):
        assert verdict(shared_with_flock, flock=True) == [], shared_with_flock
    for no_flock in ("/mnt/smb/o", "/mnt/nfs-nolock/o", "/mnt/lustre-local/o"):
        [refused] = verdict(no_flock, flock=True)
        assert "flock does not exclude other hosts" in refused and no_flock in refused
    [store] = verdict("/mnt/nfs/s.db", store=True)  # SQLite is never shared, even on NFS
    assert "SQLite" in store and "Kafka backend" in store and "nfs4 at /mnt/nfs" in store
    [lake] = problems([LocalPath("the ParquetSink path", "/srv/lake")], MOUNTS)
    assert "object storage" in lake
