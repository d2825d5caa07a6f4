"""Drafters: `base` (the interface), `slice` (a draft cut from the target), `feature` (the EAGLE-3-style
feature drafter), `lookup` (prompt lookup and the answer store), `merged` (lookup chains merged into a
model's tree), `adaptive` (confidence-driven trees), `weights` (drafter files and the shipped drafters)."""
