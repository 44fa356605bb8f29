"""tdaxbench -- `tdax bench`: the reference experiments, side by side, with plots."""
