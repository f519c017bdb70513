"""Making Placement match Ironic: plan (pure), the two clients, per-node sync, reconcile."""
