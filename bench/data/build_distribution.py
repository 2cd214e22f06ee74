"""Entry point: ``python -m bench.data.build_distribution --path X --field text --by tokens --out my.csv``.

Only a shim over ``bench.data._cli.main``. Import the function as ``from bench.data import
build_distribution``; importing this module instead would rebind ``bench.data.build_distribution``
to the module (Python sets a package attribute when it imports a submodule of the same name).
"""
from bench.data._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
