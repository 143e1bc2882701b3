"""`netbench sweep`: a grid of runs, clusters and workers reused between points, each point re-predicted."""
