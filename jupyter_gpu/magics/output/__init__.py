"""What a magic shows: number formats, tables and figures as mimebundles."""
