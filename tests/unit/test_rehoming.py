"""rp_reporter.rehoming: who is fenced, and which nodes a survivor moves (pure)."""

from rp_reporter import rehoming


def test_fenced_takes_both_the_lease_and_nova():
    up = {"compute-1": True, "compute-2": False, "compute-3": False, "compute-4": True}
    live = {"compute-1", "compute-3"}
    # compute-2: lease gone and nova says down.  compute-3: nova says down but its
    # lease is live (nova's report is late, or it is forced down by mistake): not
    # fenced.  compute-4: lease gone but nova sees it up: partitioned, not dead.
    assert rehoming.fenced_services(up, live, "compute-1") == ["compute-2"]


def test_a_service_never_fences_itself_and_hosts_compare_without_case():
    up = {"Compute-1": False, "compute-2": False}
    assert rehoming.fenced_services(up, {"COMPUTE-2"}, "compute-1") == []


def test_only_the_nodes_this_service_owns_are_moved_one_instance_each():
    instances = [("n2", "i2"), ("n1", "i1"), ("n3", "i3a"), ("n3", "i3b"), (None, "i4")]
    owned = {"n1", "n3"}
    moves = rehoming.nodes_to_move(instances, owned.__contains__)
    assert moves == [("n1", ["i1"])]  # n2: another's; n3: two instances; i4: no node
    assert rehoming.refused(instances) == {"n3": 2}
