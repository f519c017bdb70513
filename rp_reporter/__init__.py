"""rp_reporter: keeps Placement's picture of Ironic's bare-metal nodes right and fresh."""
