"""Host hygiene checks shared by the jail suites: after a run, the jail named in the result left no cgroup
leaf, no process and no mount behind."""
import glob
import os


def _mounts():
    with open("/proc/self/mountinfo") as f:
        return sorted(line.split()[4] for line in f)


def snapshot():
    return {"mounts": _mounts()}


def leftovers(before, jail_id=None):
    found = []
    # Other tests on a shared host mount things too: only mounts where a jail could leak one count.
    new = set(_mounts()) - set(before["mounts"])
    for point in sorted(new):
        if point == "/tmp" or point.startswith(("/tmp/", "/var/lib/dome", "/var/tmp/dome")) or "dome" in point:
            found.append("new host mount " + point)
    if jail_id:
        for leaf in glob.glob("/sys/fs/cgroup/**/" + jail_id, recursive=True):
            found.append("cgroup " + leaf)
        for status in glob.glob("/proc/[0-9]*/cgroup"):
            try:
                with open(status) as f:
                    if jail_id in f.read():
                        found.append("process " + status.split("/")[2])
            except OSError:
                pass
    return found
