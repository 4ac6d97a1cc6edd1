"""Offline data several CPU tiers share (the Shakespeare plays, Fashion-MNIST): where it is
installed and how it is fetched. No benchmark here: each tier makes its own task of it."""
