"""Find and remove what killed runs left behind, and only netbench's own objects.

Everything a run creates lives inside its ``netbench-<run_id>-*`` namespaces (links, qdiscs,
iptables rules, the delay line), so cleaning means: kill the processes inside those namespaces,
then delete the namespaces. Runs whose owner process is still alive are left alone unless forced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from netbench.emulation import naming, netns


@dataclass
class Leftovers:
    run_ids: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    stale_registrations: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.namespaces or self.pids or self.stale_registrations)


def find_leftovers(include_live: bool = False) -> Leftovers:
    """Namespaces, processes and registry entries of runs whose owner is gone."""
    found = Leftovers()
    for name in netns.list_netns():
        run_id = naming.run_id_of(name)
        if run_id is None or (not include_live and naming.owner_alive(run_id)):
            continue
        found.namespaces.append(name)
        if run_id not in found.run_ids:
            found.run_ids.append(run_id)
    found.pids = netns.pids_in(found.namespaces)
    found.stale_registrations = [r for r in naming.registered_run_ids() if (include_live or not naming.owner_alive(r))]
    return found


def clean(include_live: bool = False) -> Leftovers:
    """Remove leftovers; returns what was removed."""
    found = find_leftovers(include_live)
    netns.kill_pids(found.pids)
    for name in found.namespaces:
        netns.remove(name)
    for run_id in found.stale_registrations:
        naming.unregister(naming.RunNames(run_id))
    return found
