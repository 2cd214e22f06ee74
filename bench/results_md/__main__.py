"""python -m bench.results_md"""
from . import main


main()
