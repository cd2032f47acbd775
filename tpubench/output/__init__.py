"""Output: result files, the reports, exports and comparisons made from them."""
