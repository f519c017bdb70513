"""The agent's trait rules (``[traits] rules_file``): loaded at start, where a
bad file is one line and exit 2, and again on SIGHUP, where a bad file keeps
the rules in force."""

from rp_reporter import traits
from rp_reporter.sync import capability_traits


def load_rules(conf):
    """The trait rules of ``[traits] rules_file``, or None when it is unset; a bad
    file raises ValueError, in one line naming the option, the file and the place."""
    path = conf.traits.rules_file
    if not path:
        return None
    try:
        return traits.load_rules(path)
    except traits.RulesError as e:
        raise ValueError(f"[traits] rules_file: {e}") from None


def node_traits(ironic, rules, tenancy=None):
    """The derived-trait writer for these rules and tenancy's public trait (None:
    no derived traits at all)."""
    if rules is None and tenancy is None:
        return None
    return capability_traits.NodeTraits(ironic, rules, tenancy)
