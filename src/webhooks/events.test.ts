import { describe, expect, it } from 'vitest';
import { experiences } from '../resources/experiences.js';
import { eventPayload, pingPayload } from './events.js';

describe('eventPayload', () => {
  const record = {
    url: '/api/v1/experiences/42/',
    id: 42,
    title: 'New title',
    q_like_dislike: 'like',
    owner: '/api/v1/users/3/',
    created_at: '2026-11-22T00:00:00.000Z',
    updated_at: '2026-11-22T00:00:01.000Z',
  };
  const actor = { id: 3, username: 'alice', passwordChangedAt: 0, roles: [] };

  it('has the GitHub shape of API.md §4', () => {
    const body = eventPayload(
      'experience',
      { resource: experiences, action: 'updated', record, changes: { title: { from: 'Old' } }, actor },
      { publicUrl: 'https://api.example.com', owner: { login: 'alice', id: 3 }, repositoryId: 1 },
    );
    expect(body).toEqual({
      action: 'updated',
      experience: { ...record, url: 'https://api.example.com/api/v1/experiences/42/', number: 42 },
      changes: { title: { from: 'Old' } },
      repository: { id: 1, full_name: 'alice/experiences', owner: { login: 'alice', id: 3 } },
      sender: { login: 'alice', id: 3 },
    });
  });

  it('omits changes when there are none', () => {
    const body = eventPayload('experience', { resource: experiences, action: 'created', record, actor }, { publicUrl: 'http://x', owner: { login: 'alice', id: 3 }, repositoryId: 1 });
    expect(body).not.toHaveProperty('changes');
  });
});

describe('pingPayload', () => {
  it('carries zen, the hook id and the hook, and the sender', () => {
    const body = pingPayload({ id: 7, target_url: 'https://r.example/hook' }, { login: 'alice', id: 3 });
    expect(body).toMatchObject({ zen: expect.any(String), hook_id: 7, hook: { id: 7, target_url: 'https://r.example/hook' }, sender: { login: 'alice', id: 3 } });
  });
});
