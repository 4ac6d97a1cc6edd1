"""`trainclock plan --validate`: each calibration against the results it was not fitted on
(leave-one-out, extrapolation from small systems to large ones)."""
