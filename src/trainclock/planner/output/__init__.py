"""What the planner prints and saves: terminal tables, scaling curves, `trainclock run` lines."""
