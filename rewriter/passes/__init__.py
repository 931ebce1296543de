"""The rewriter's passes, one per module, applied in the order listed in rewriter.planner."""
