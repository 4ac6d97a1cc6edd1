"""What people look at: terminal tables now; plots and pages later."""
