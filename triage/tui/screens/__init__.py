"""The app's screens: main (ticket and decisions), history, export, help, a one-line prompt."""
