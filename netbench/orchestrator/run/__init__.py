"""`netbench run`: one training run on an emulated cluster, from resolved config to run directory."""
