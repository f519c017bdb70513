"""The demos: the agents at work on the real services, shown step by step.

    tox -e demo         # python -m tools.demo.agents: three agents on a hash ring
    tox -e demo-nova    # python -m tools.demo.nova: the same with a whole nova in front

agents.py and nova.py are the two demos, common.py what they share."""
