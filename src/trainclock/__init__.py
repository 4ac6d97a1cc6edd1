"""trainclock: an open time-to-train benchmark system for AI training clusters."""

__version__ = "0.1.0"
