"""How sure a comparison is: the design, repeated t intervals, verdicts, failed runs, planning.

Pure numpy and scipy, vectorised over simulated sweeps so that the tests check what each number means by running
this code on thousands of sweeps where the truth is known. Nothing here reads files: ``ablate.report`` and the
sweep's sequential queue feed it values by seed.

    design       the family's error, the margin, the seeds and looks (Design, Margin)
    boundaries   critical values of repeated t intervals for any sequence of looks
    judge        one row against the base at its looks: Δ, interval, failure counts, verdict
    verdict      verdicts read off an interval, and the guard for failed runs
    planning     the smallest Δ the seeds could detect, and the seeds a margin needs
    compare      the rows of a report: values by seed in, one Comparison per row out
"""
