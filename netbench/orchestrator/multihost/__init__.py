"""`netbench worker`: one host's rank on real machines under torchrun, its egress shaped toward its peers."""
