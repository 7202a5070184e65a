"""Load benchmarks; a package so that the scripts, which put the repository on sys.path, import bench.harness."""
