"""The GPT-3 benchmark family (MLPerf Training gpt3 at 175B, plus smaller members)."""
