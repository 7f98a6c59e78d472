"""What is kept: history, config, user paths and assets, atomic files, exports."""
