"""Media: what people send beyond text and what the agent sends back. Content sniffing (a file is what its bytes
say, never what its name says), images prepared for a vision model (Pillow: EXIF orientation, downscale,
re-encode, metadata stripped, the decompression-bomb limit) and re-read from the history's references,
voice notes transcribed and answers spoken through OpenAI-compatible audio endpoints, the files the
``send_file`` tool hands to a turn's reply, and /voice.

It stands between commands and outbound: it imports the kernel, the platform contract, the config, the store
and the command registry; turns use it (the lane's prepare step, the executor). Platforms never import it.
"""
