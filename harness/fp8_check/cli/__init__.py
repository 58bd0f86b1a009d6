"""The command line and the pytest plugin: commands register here, nothing imports them (stage `cli`, fp8_check/stages.py)."""

# no face: nothing imports the commands
