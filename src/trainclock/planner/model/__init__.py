"""The planner's model of a training run: hardware, layouts and their feasibility, collectives,
memory, step time, convergence, the time-to-train prediction, the layout search, and the layouts
the published submissions ran."""
