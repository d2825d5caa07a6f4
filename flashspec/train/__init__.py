"""Training drafters on the target's own answers: `answers` (the data), `distill` (the loss and the
slice's trainer), `features` (the feature cache), `ttt` (the feature drafter's trainer), `acceptance`
(measuring a draft) and `export` (for serving engines)."""
