"""What a measurement leaves on disk: the result record, its atomic files, and cells safe for a spreadsheet."""
